//! The handles' controls against librdkafka's mock cluster: `purge` hands back what was not
//! sent and the producer goes on; `flush_within` ends with everything acknowledged or at its
//! deadline with the count left; `close_within` ends at its deadline with one honest report
//! per record. Read back with librdkafka's consumer.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use producer_core::{InFlight, ProduceError, PurgeScope, Record};

use crate::drive::{Driver, Failure};
use crate::driver_suite::{assert_sent_record_back, reports_of};
use crate::readback::read_back_all;
use crate::running::{Options, Running};
use crate::MockKafka;

const TOPIC: &str = "control";
const PARTITIONS: i32 = 3;

fn record(id: u64) -> Record {
    Record::new(TOPIC, format!("value-{id}")).with_key(format!("k{}", id % 7))
}

/// The ids of the records read back from the mock cluster, each once (a duplicate fails).
fn read_ids(mock: &MockKafka) -> HashSet<u64> {
    let mut ids = HashSet::new();
    for c in read_back_all(
        &mock.bootstrap_servers(),
        TOPIC,
        PARTITIONS,
        Duration::from_secs(30),
    ) {
        let v = String::from_utf8(c.value.unwrap()).unwrap();
        let id: u64 = v.trim_start_matches("value-").parse().unwrap();
        assert!(ids.insert(id), "record {id} read twice");
    }
    ids
}

/// Records lingering (`linger.ms` far away) are purged: each comes back failed with
/// `Purged { possibly_persisted: false }`, as it was sent; the records sent after the purge
/// are delivered, and the log holds exactly those.
pub fn purge_hands_back_the_unsent_records_and_the_rest_are_delivered(driver: Driver) {
    let mock = MockKafka::new(1, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let config = mock
        .producer_config()
        .linger(Duration::from_secs(600))
        .build()
        .unwrap();
    let p = Running::start(driver, Options::new(config));
    let sent: Vec<Record> = (0..100).map(record).collect();
    for (id, r) in (0u64..).zip(&sent) {
        p.send(r.clone(), id).unwrap();
    }
    assert_eq!(p.purge(PurgeScope::All, InFlight::Wait), Some(100));
    let reports = reports_of(&p, 0..100);
    for (id, r) in reports {
        assert_eq!(
            r.result,
            Err(Failure::Produce(ProduceError::Purged {
                possibly_persisted: false
            })),
            "record {id}"
        );
        assert_sent_record_back(r.record, &sent[id as usize], id);
    }
    // A scope that names nothing removes nothing.
    let scope = PurgeScope::Topic(Arc::from("elsewhere"));
    assert_eq!(p.purge(scope, InFlight::Abandon), Some(0));
    for id in 100..150 {
        p.send(record(id), id).unwrap();
    }
    p.flush();
    for (id, r) in reports_of(&p, 100..150) {
        assert!(r.result.is_ok(), "record {id}: {:?}", r.result);
    }
    p.close();
    assert_eq!(read_ids(&mock), (100..150).collect::<HashSet<_>>());
}

/// `flush_within` answers 0 once every record is acknowledged; with the broker down it
/// answers at its deadline with the records left, which are delivered once the broker is
/// back (nothing was cancelled).
pub fn flush_within_completes_or_tells_what_is_left(driver: Driver) {
    let mock = MockKafka::new(1, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let config = mock.producer_config().build().unwrap();
    let p = Running::start(driver, Options::new(config));
    for id in 0..200 {
        p.send(record(id), id).unwrap();
    }
    let done = p.flush_within(Duration::from_secs(60)).expect("running");
    assert_eq!(done.unreported, 0);
    assert!(done.is_complete());
    let reports = reports_of(&p, 0..200);
    assert!(reports.values().all(|r| r.result.is_ok()));

    mock.broker_down(1).unwrap();
    for id in 200..220 {
        p.send(record(id), id).unwrap();
    }
    let left = p.flush_within(Duration::from_millis(500)).expect("running");
    assert_eq!(left.unreported, 20, "no broker: nothing acknowledged");
    assert!(p.reports().is_empty(), "nothing was cancelled");
    mock.broker_up(1).unwrap();
    p.flush();
    for (id, r) in reports_of(&p, 200..220) {
        assert!(r.result.is_ok(), "record {id}: {:?}", r.result);
    }
    p.close();
    assert_eq!(read_ids(&mock), (0..220).collect::<HashSet<_>>());
}

/// `close_within` with the broker down returns at its deadline: every record has one report,
/// `Purged` (never sent, not in the log) or `CloseTimedOut` (sent, possibly written), in the
/// numbers the outcome gives; later sends are refused.
pub fn close_within_ends_what_is_held_at_its_deadline(driver: Driver) {
    let mock = MockKafka::new(1, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let config = mock.producer_config().build().unwrap();
    let p = Running::start(driver, Options::new(config));
    for id in 0..10 {
        p.send(record(id), id).unwrap();
    }
    p.flush();
    assert!(reports_of(&p, 0..10).values().all(|r| r.result.is_ok()));
    mock.broker_down(1).unwrap();
    for id in 10..40 {
        p.send(record(id), id).unwrap();
    }
    let outcome = p
        .close_within(Duration::from_millis(800))
        .expect("it was running");
    assert_eq!(outcome.purged + outcome.timed_out, 30, "{outcome:?}");
    assert!(!outcome.in_time());
    let (mut purged, mut timed_out) = (Vec::new(), 0);
    for (id, r) in reports_of(&p, 10..40) {
        match r.result {
            Err(Failure::Produce(ProduceError::Purged {
                possibly_persisted: false,
            })) => purged.push(id),
            Err(Failure::Produce(ProduceError::CloseTimedOut {
                possibly_persisted: true,
            })) => timed_out += 1,
            other => panic!("record {id}: {other:?}"),
        }
        assert!(r.record.is_some(), "record {id} handed back");
    }
    assert_eq!(
        (purged.len(), timed_out),
        (outcome.purged, outcome.timed_out)
    );
    assert!(p.is_closed());
    assert!(p.send(record(99), 99).is_err(), "closed");
    mock.broker_up(1).unwrap();
    let logged = read_ids(&mock);
    assert!((0..10).all(|id| logged.contains(&id)));
    assert!(logged.iter().all(|id| *id < 40));
    assert!(
        purged.iter().all(|id| !logged.contains(id)),
        "a record reported never sent is in the log"
    );
}

/// `close_within` while the core is full (`buffer_max_records` reached with the broker down:
/// a record held aside for room, more queued behind it) still returns at its deadline: the
/// records the core never took fail as never sent, the rest as the core's close deadline
/// says; the outcome's counts are the reports seen, each record has exactly one, and none
/// reported never sent is in the log.
pub fn close_within_holds_its_deadline_while_the_core_is_full(driver: Driver) {
    let mock = MockKafka::new(1, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let config = mock
        .producer_config()
        .buffer_max_records(4)
        .build()
        .unwrap();
    let p = Running::start(driver, Options::new(config));
    for id in 0..4 {
        p.send(record(id), id).unwrap();
    }
    p.flush();
    assert!(reports_of(&p, 0..4).values().all(|r| r.result.is_ok()));
    mock.broker_down(1).unwrap();
    // 4 in the core, one held aside for room, the rest queued behind it.
    for id in 4..60 {
        p.send(record(id), id).unwrap();
    }
    let flushed = p
        .flush_within(Duration::from_millis(300))
        .expect("it was running");
    assert_eq!(
        flushed.unreported, 56,
        "the core's, the one held, the queued"
    );
    assert!(p.reports().is_empty(), "a flush's deadline cancels nothing");
    let outcome = p
        .close_within(Duration::from_millis(500))
        .expect("it was running");
    assert_eq!(outcome.purged + outcome.timed_out, 56, "{outcome:?}");
    let (mut purged, mut timed_out) = (Vec::new(), 0);
    for (id, r) in reports_of(&p, 4..60) {
        match r.result {
            Err(Failure::Produce(ProduceError::Purged {
                possibly_persisted: false,
            })) => purged.push(id),
            Err(Failure::Produce(ProduceError::CloseTimedOut {
                possibly_persisted: true,
            })) => timed_out += 1,
            other => panic!("record {id}: {other:?}"),
        }
        assert!(r.record.is_some(), "record {id} handed back");
    }
    assert_eq!(
        (purged.len(), timed_out),
        (outcome.purged, outcome.timed_out)
    );
    assert!(
        purged.len() >= 52,
        "the core never had 52 of them: {outcome:?}"
    );
    assert!(p.is_closed());
    assert!(p.send(record(99), 99).is_err(), "closed");
    mock.broker_up(1).unwrap();
    let logged = read_ids(&mock);
    assert!((0..4).all(|id| logged.contains(&id)));
    assert!(
        purged.iter().all(|id| !logged.contains(id)),
        "a record reported never sent is in the log"
    );
}
