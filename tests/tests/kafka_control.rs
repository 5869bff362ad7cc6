//! Purge and deadlines on Apache Kafka itself (one shared single-node KRaft cluster, 4.1.1,
//! behind the fault proxy), read back with librdkafka's consumer:
//!
//! - an idempotent producer purges with `InFlight::Abandon` while its broker is frozen
//!   (SIGSTOP) with requests in flight, then keeps producing once the broker is back: no
//!   record is read twice, every acknowledged record is in the log, no record reported
//!   `Purged { possibly_persisted: false }` is (the broker accepts the new records: the
//!   partitions restarted their sequences under a new epoch);
//! - a purge inside a transaction aborts it: a `read_committed` read has none of it, the
//!   application's commit is refused with `TransactionError::Purged`, and the next
//!   transaction commits;
//! - `close_within` with the broker frozen returns (its outcome and reports are checked, not
//!   the clock), and every record has exactly one report, honestly marked: delivered ones in
//!   the log, those reported never sent absent from it.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use producer_core::{InFlight, ProduceError, PurgeScope, Record, TransactionError};
use producer_tests::drive::{Driver, Failure};
use producer_tests::driver_suite::reports_of;
use producer_tests::kafka::suite::producer_config;
use producer_tests::kafka::{shared_cluster, ClusterSpec, TestCluster};
use producer_tests::readback::{read_back_isolated, Isolation};
use producer_tests::running::{Options, Reported, Running};

const PARTITIONS: i32 = 3;

fn cluster() -> Option<TestCluster> {
    shared_cluster(|| ClusterSpec::single().name("control"))
}

fn record(topic: &str, id: u64) -> Record {
    Record::new(topic, format!("{id}")).with_key(format!("k{}", id % 11))
}

/// The ids read back from `topic` at `isolation`, with how many times each was read.
fn read_ids(kafka: &TestCluster, topic: &str, isolation: Isolation) -> HashMap<u64, usize> {
    let consumed = read_back_isolated(
        &kafka.bootstrap_servers(),
        topic,
        PARTITIONS,
        isolation,
        Duration::from_secs(30),
    )
    .expect("read back");
    let mut ids = HashMap::new();
    for c in consumed {
        let id: u64 = String::from_utf8(c.value.unwrap())
            .unwrap()
            .parse()
            .unwrap();
        *ids.entry(id).or_insert(0) += 1;
    }
    ids
}

/// Waits (bounded) until the producer has a Produce request in flight that its frozen broker
/// will not answer: the purge or the close then meets requests in flight.
fn wait_for_produce_in_flight(p: &Running) {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        let m = p.metrics().expect("running");
        if m.brokers.iter().any(|b| b.in_flight_produce > 0) {
            return;
        }
        std::thread::yield_now();
    }
    panic!("no Produce request in flight on the frozen broker");
}

/// Checks the reports against the log: one report per record (`reports_of` fails a second
/// one), a record reported delivered read exactly once, a record reported certainly not
/// written never read, and nothing read twice.
fn check_against_log(reports: &HashMap<u64, Reported>, logged: &HashMap<u64, usize>) {
    for (id, copies) in logged {
        assert_eq!(*copies, 1, "record {id} read {copies} times");
    }
    for (id, r) in reports {
        match &r.result {
            Ok(_) => assert!(
                logged.contains_key(id),
                "record {id} delivered, not in the log"
            ),
            Err(Failure::Produce(e)) if !e.possibly_persisted() => assert!(
                !logged.contains_key(id),
                "record {id} reported not written ({e:?}) is in the log"
            ),
            Err(_) => {}
        }
    }
}

fn abandon_then_keep_producing(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let topic = kafka.topic("purge-abandon", PARTITIONS, 1, &[]);
    let config = producer_config(&kafka)
        .linger(Duration::from_millis(5))
        // Small batches: five requests in flight hold a few hundred records, the rest wait.
        .batch_size(1024)
        // The records queued behind the frozen broker are the subject here: without the
        // queue-delay limit (on, it would push back on `send` once the frozen broker stops
        // draining, long before the 3,000 records are queued), and without batch growth
        // (batches growing while the slots are busy would carry records the test means to
        // be waiting into the requests in flight).
        .queue_delay_target(Duration::ZERO)
        .batch_grow_max(0)
        .build()
        .unwrap();
    assert!(config.idempotence, "idempotent by default");
    let p = Running::start(driver, Options::new(config));
    for id in 0..300 {
        p.send(record(&topic, id), id).unwrap();
    }
    p.flush();
    let mut reports = reports_of(&p, 0..300);
    let broker = kafka.node_ids()[0];
    kafka.pause(broker).unwrap();
    for id in 300..3300 {
        p.send(record(&topic, id), id).unwrap();
    }
    wait_for_produce_in_flight(&p);
    let removed = p
        .purge(PurgeScope::All, InFlight::Abandon)
        .expect("running");
    assert_eq!(removed, 3000, "every record not acknowledged was removed");
    let purged = reports_of(&p, 300..3300);
    let abandoned = purged
        .values()
        .filter(|r| {
            r.result
                == Err(Failure::Produce(ProduceError::Purged {
                    possibly_persisted: true,
                }))
        })
        .count();
    assert!(abandoned > 0, "requests in flight were abandoned");
    assert!(abandoned < 3000, "records not sent yet were purged too");
    for (id, r) in &purged {
        assert!(
            matches!(r.result, Err(Failure::Produce(ProduceError::Purged { .. }))),
            "record {id}: {:?}",
            r.result
        );
        assert!(r.record.is_some(), "record {id} handed back");
    }
    reports.extend(purged);
    kafka.resume(broker).unwrap();
    for id in 3300..3700 {
        p.send(record(&topic, id), id).unwrap();
    }
    p.flush();
    let after = reports_of(&p, 3300..3700);
    for (id, r) in &after {
        assert!(
            r.result.is_ok(),
            "record {id} after the purge: {:?}",
            r.result
        );
    }
    reports.extend(after);
    p.close();
    let logged = read_ids(&kafka, &topic, Isolation::ReadUncommitted);
    check_against_log(&reports, &logged);
    println!(
        "{driver:?}: 3,700 records, {removed} purged ({abandoned} abandoned in flight), {} read \
         back",
        logged.len()
    );
}

#[test]
fn kafka_purge_abandon_then_more_records_tokio() {
    abandon_then_keep_producing(Driver::Tokio);
}

#[test]
fn kafka_purge_abandon_then_more_records_mio() {
    abandon_then_keep_producing(Driver::MioThreaded);
}

#[test]
fn kafka_purge_inside_a_transaction_aborts_it() {
    let Some(mut kafka) = cluster() else { return };
    let topic = kafka.topic("purge-txn", PARTITIONS, 1, &[]);
    let config = producer_config(&kafka)
        .transactional_id("purge-txn")
        .linger(Duration::from_secs(60))
        .build()
        .unwrap();
    let p = Running::start(Driver::MioThreaded, Options::new(config));
    let txn = p.transactions().expect("transactional");
    txn.init().unwrap();
    txn.begin().unwrap();
    for id in 0..100 {
        p.send(record(&topic, id), id).unwrap();
    }
    // Acknowledged (their reports wait for the transaction's end)...
    p.flush();
    // ... and 50 more lingering.
    for id in 100..150 {
        p.send(record(&topic, id), id).unwrap();
    }
    assert_eq!(p.purge(PurgeScope::All, InFlight::Wait), Some(50));
    assert_eq!(txn.commit(), Err(TransactionError::Purged));
    txn.abort().unwrap();
    let reports = reports_of(&p, 0..150);
    for (id, r) in &reports {
        let expected = match id {
            0..100 => ProduceError::TransactionAborted,
            _ => ProduceError::Purged {
                possibly_persisted: false,
            },
        };
        assert_eq!(r.result, Err(Failure::Produce(expected)), "record {id}");
    }
    txn.begin().unwrap();
    for id in 150..180 {
        p.send(record(&topic, id), id).unwrap();
    }
    txn.commit().unwrap();
    let committed = reports_of(&p, 150..180);
    assert!(committed.values().all(|r| r.result.is_ok()));
    p.close();
    let logged = read_ids(&kafka, &topic, Isolation::ReadCommitted);
    assert_eq!(
        logged.keys().copied().collect::<HashSet<_>>(),
        (150..180).collect::<HashSet<_>>(),
        "read_committed has the committed transaction only"
    );
    assert!(logged.values().all(|&n| n == 1));
    let all = read_ids(&kafka, &topic, Isolation::ReadUncommitted);
    assert!(
        (100..150).all(|id| !all.contains_key(&id)),
        "purged records were never written"
    );
}

fn close_within_with_the_broker_frozen(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let topic = kafka.topic("close-within", PARTITIONS, 1, &[]);
    let config = producer_config(&kafka)
        .linger(Duration::from_millis(5))
        // Small batches: five requests in flight hold a few hundred records, the rest wait.
        .batch_size(1024)
        // The records queued behind the frozen broker are the subject here: without the
        // queue-delay limit (on, it would push back on `send` once the frozen broker stops
        // draining, long before the 3,000 records are queued), and without batch growth
        // (batches growing while the slots are busy would carry records the test means to
        // be waiting into the requests in flight).
        .queue_delay_target(Duration::ZERO)
        .batch_grow_max(0)
        .build()
        .unwrap();
    let p = Running::start(driver, Options::new(config));
    for id in 0..200 {
        p.send(record(&topic, id), id).unwrap();
    }
    p.flush();
    let mut reports = reports_of(&p, 0..200);
    assert!(reports.values().all(|r| r.result.is_ok()));
    let broker = kafka.node_ids()[0];
    kafka.pause(broker).unwrap();
    for id in 200..3200 {
        p.send(record(&topic, id), id).unwrap();
    }
    wait_for_produce_in_flight(&p);
    let outcome = p
        .close_within(Duration::from_secs(2))
        .expect("it was running");
    let ended = reports_of(&p, 200..3200);
    kafka.resume(broker).unwrap();
    let (mut purged, mut timed_out) = (0, 0);
    for (id, r) in &ended {
        match &r.result {
            Err(Failure::Produce(ProduceError::Purged {
                possibly_persisted: false,
            })) => purged += 1,
            Err(Failure::Produce(ProduceError::CloseTimedOut {
                possibly_persisted: true,
            })) => timed_out += 1,
            other => panic!("record {id}: {other:?}"),
        }
    }
    assert_eq!((purged, timed_out), (outcome.purged, outcome.timed_out));
    assert_eq!(purged + timed_out, 3000);
    assert!(timed_out > 0, "requests were in flight at the deadline");
    assert!(
        purged > 0,
        "records were waiting to be sent at the deadline"
    );
    assert!(p.is_closed());
    reports.extend(ended);
    let logged = read_ids(&kafka, &topic, Isolation::ReadUncommitted);
    check_against_log(&reports, &logged);
    println!(
        "{driver:?}: close_within with the broker frozen: {purged} purged, {timed_out} timed \
         out ({} of them written after all), {} read back",
        (200..3200).filter(|id| logged.contains_key(id)).count(),
        logged.len()
    );
}

#[test]
fn kafka_close_within_with_the_broker_frozen_tokio() {
    close_within_with_the_broker_frozen(Driver::Tokio);
}

#[test]
fn kafka_close_within_with_the_broker_frozen_mio() {
    close_within_with_the_broker_frozen(Driver::MioThreaded);
}
