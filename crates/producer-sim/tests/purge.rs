//! `purge`, `flush_within` and `close_within` against the simulated cluster, whose brokers
//! enforce Kafka's rules (sequences, epochs, transactions). Every record's report is checked
//! against the logs: exactly one report per record, a record reported delivered is in the log
//! where the report says, one reported `Purged { possibly_persisted: false }` is in no log,
//! and nothing is written twice.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use producer_core::{
    Config, ConfigBuilder, Event, InFlight, ProduceError, Producer, PurgeScope, Record,
    TransactionError, TransactionOperation,
};
use producer_sim::{drive::Harness, SimCluster, SimConfig};

const TOPIC: &str = "a";
const PARTITIONS: i32 = 6;

fn harness(seed: u64, tune: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Harness<u32> {
    let t0 = Instant::now();
    let mut sim = SimCluster::new(SimConfig::with_brokers(3, seed), t0);
    sim.create_topic(TOPIC, PARTITIONS).unwrap();
    let config = tune(Config::builder(sim.bootstrap()).seed(seed))
        .build()
        .unwrap();
    Harness::new(Producer::new(config, t0), sim, t0)
}

fn record(n: u32) -> Record {
    Record::new(TOPIC, n.to_string()).with_key(format!("k{}", n % 31))
}

/// Every record's value -> where the logs have it (for a transactional producer: the
/// read_committed view, where an aborted record is not).
fn logged(h: &Harness<u32>) -> HashMap<u32, Vec<(i32, i64)>> {
    let transactional = h.producer.config().transactional_id.is_some();
    let mut out: HashMap<u32, Vec<(i32, i64)>> = HashMap::new();
    for p in 0..PARTITIONS {
        let records = match transactional {
            true => h.cluster.read_committed(TOPIC, p),
            false => h.cluster.log(TOPIC, p).to_vec(),
        };
        for r in records.iter().filter(|r| r.control.is_none()) {
            let v = std::str::from_utf8(r.value.as_deref().unwrap())
                .unwrap()
                .parse()
                .unwrap();
            out.entry(v).or_default().push((p, r.offset));
        }
    }
    out
}

/// What the reports of records `0..n` said, checked against the logs: one report per record,
/// delivered ones where the log has them, none written twice, `possibly_persisted = false`
/// ones absent. Returns the errors of the failed records by record.
fn check_reports(h: &Harness<u32>, n: u32) -> HashMap<u32, ProduceError> {
    let logs = logged(h);
    let mut reports: HashMap<u32, usize> = HashMap::new();
    let mut failed = HashMap::new();
    for d in &h.deliveries {
        *reports.entry(d.opaque).or_default() += 1;
        let copies = logs.get(&d.opaque).map_or(0, Vec::len);
        assert!(copies <= 1, "record {} written {copies} times", d.opaque);
        match &d.result {
            Ok(m) => assert_eq!(
                logs.get(&d.opaque).map(|l| l[0]),
                Some((m.partition, m.offset)),
                "record {} delivered where the log does not have it",
                d.opaque
            ),
            Err(f) => {
                if !f.error.possibly_persisted() {
                    assert_eq!(
                        copies, 0,
                        "record {} ({:?}) is in the log",
                        d.opaque, f.error
                    );
                }
                assert_eq!(
                    f.record.value.as_deref(),
                    Some(d.opaque.to_string().as_bytes()),
                    "the record is handed back"
                );
                failed.insert(d.opaque, f.error.clone());
            }
        }
    }
    for i in 0..n {
        assert_eq!(reports.get(&i), Some(&1), "record {i}: reports");
    }
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
    assert!(
        h.contract_violations.is_empty(),
        "{:?}",
        h.contract_violations
    );
    failed
}

const NOT_SENT: ProduceError = ProduceError::Purged {
    possibly_persisted: false,
};

/// A purge (waiting for what is in flight) in the middle of a stream hands back exactly the
/// records not yet sent: accepted = delivered + purged, the purged ones are exactly those not
/// in the log, and the records sent after the purge are delivered.
#[test]
fn a_purge_mid_run_hands_back_exactly_the_unsent_records() {
    for seed in 1..=6 {
        let mut h = harness(seed, |b| b.linger(Duration::from_millis(40)));
        let mut n = 0u32;
        let mut purged = 0;
        for round in 0..20 {
            for _ in 0..60 {
                h.send(record(n), n).unwrap();
                n += 1;
            }
            h.run_for(Duration::from_millis(15));
            if round == 10 {
                purged = h.producer.purge(h.now, PurgeScope::All, InFlight::Wait);
            }
        }
        assert!(h.flush(Duration::from_secs(60)), "seed {seed}");
        let failed = check_reports(&h, n);
        assert!(purged > 0, "seed {seed}: the purge found records not sent");
        assert_eq!(failed.len(), purged, "seed {seed}: only the purged failed");
        assert!(failed.values().all(|e| *e == NOT_SENT), "{failed:?}");
        let logs = logged(&h);
        let delivered = h.deliveries.iter().filter(|d| d.result.is_ok()).count();
        assert_eq!(
            delivered + purged,
            n as usize,
            "accepted = delivered + purged"
        );
        assert_eq!(logs.len(), delivered, "the log holds exactly the delivered");
        for i in 0..n {
            assert_eq!(
                logs.contains_key(&i),
                !failed.contains_key(&i),
                "seed {seed}: record {i}"
            );
        }
        // Records sent after the purge (the last rounds) were all delivered.
        assert!(
            (n - 300..n).all(|i| !failed.contains_key(&i)),
            "seed {seed}"
        );
        assert_eq!(h.producer.buffered_bytes(), 0);
    }
}

/// An idempotent producer abandons requests in flight on a stalled broker (the broker handles
/// them: they are written), then goes on producing: the partitions it abandoned restart their
/// sequence under a new epoch, the brokers (which enforce the sequence rules) accept every
/// later record, and no record is written twice.
#[test]
fn abandon_with_idempotence_then_more_sends_leaves_no_duplicate_and_no_gap() {
    for seed in 1..=4 {
        let mut h = harness(seed, |b| {
            b.linger(Duration::from_millis(2))
                .request_timeout(Duration::from_secs(5))
        });
        let mut n = 0u32;
        for _ in 0..200 {
            h.send(record(n), n).unwrap();
            n += 1;
        }
        assert!(h.flush(Duration::from_secs(30)), "warm up");
        h.cluster.stall_connections_to(1, None).unwrap();
        for _ in 0..400 {
            h.send(record(n), n).unwrap();
            n += 1;
            if n % 40 == 0 {
                h.run_for(Duration::from_millis(3));
            }
        }
        h.run_for(Duration::from_millis(50));
        let resets_before = h
            .events
            .iter()
            .filter(|e| matches!(e, Event::SequenceReset { .. }))
            .count();
        let removed = h.producer.purge(h.now, PurgeScope::All, InFlight::Abandon);
        h.drain();
        let abandoned = h
            .deliveries
            .iter()
            .filter(|d| {
                matches!(
                    &d.result,
                    Err(f) if f.error == ProduceError::Purged { possibly_persisted: true }
                )
            })
            .count();
        assert!(
            abandoned > 0,
            "seed {seed}: requests in flight were abandoned"
        );
        assert_eq!(h.producer.buffered_records(), 0, "everything was removed");
        let purged_reports = h
            .deliveries
            .iter()
            .filter(
                |d| matches!(&d.result, Err(f) if matches!(f.error, ProduceError::Purged { .. })),
            )
            .count();
        assert_eq!(removed, purged_reports, "seed {seed}");
        h.cluster.unstall_connections_to(1, h.now).unwrap();
        let after = n;
        for _ in 0..300 {
            h.send(record(n), n).unwrap();
            n += 1;
            if n % 50 == 0 {
                h.run_for(Duration::from_millis(3));
            }
        }
        assert!(h.flush(Duration::from_secs(60)), "seed {seed}");
        let failed = check_reports(&h, n);
        assert!(
            (after..n).all(|i| !failed.contains_key(&i)),
            "seed {seed}: every record after the purge delivered: {:?}",
            failed
                .iter()
                .filter(|(i, _)| **i >= after)
                .collect::<Vec<_>>()
        );
        assert!(failed
            .values()
            .all(|e| matches!(e, ProduceError::Purged { .. })));
        let resets = h
            .events
            .iter()
            .filter(|e| matches!(e, Event::SequenceReset { .. }))
            .count();
        assert!(
            resets > resets_before,
            "seed {seed}: a partition bumped its epoch"
        );
    }
}

/// A purge inside a transaction aborts it: its acknowledged records fail with
/// `TransactionAborted`, the purged ones with `Purged`, nothing of it is committed, the
/// application's commit gets `TransactionError::Purged`, its abort completes, and the next
/// transaction commits as usual.
#[test]
fn a_purge_inside_a_transaction_aborts_it() {
    for seed in 1..=3 {
        let mut h = harness(seed, |b| {
            b.transactional_id("purging")
                .linger(Duration::from_secs(600))
        });
        h.producer.transactions().unwrap().init(h.now).unwrap();
        assert!(h.run_until(Duration::from_secs(30), |h| !h.transactions.is_empty()));
        assert_eq!(h.transactions[0].result, Ok(()));
        h.producer.transactions().unwrap().begin(h.now).unwrap();
        for n in 0..100 {
            h.send(record(n), n).unwrap();
        }
        // The first 100 acknowledged (held for the transaction's end), 50 more not sent.
        h.producer.flush(h.now);
        assert!(h.run_until(Duration::from_secs(30), |h| {
            h.producer.unacknowledged_records() == 0
        }));
        for n in 100..150 {
            h.send(record(n), n).unwrap();
        }
        h.drain();
        assert_eq!(h.producer.purge(h.now, PurgeScope::All, InFlight::Wait), 50);
        let commit = h.producer.transactions().unwrap().commit(h.now);
        assert_eq!(commit, Err(TransactionError::Purged), "seed {seed}");
        h.producer.transactions().unwrap().abort(h.now).unwrap();
        let before = h.transactions.len();
        assert!(h.run_until(Duration::from_secs(60), |h| h.transactions.len() > before));
        let r = &h.transactions[before];
        assert_eq!(
            (r.operation, &r.result),
            (TransactionOperation::Abort, &Ok(()))
        );
        assert_eq!(h.producer.buffered_records(), 0);
        let failed = check_reports(&h, 150);
        for i in 0..150 {
            let expected = match i {
                0..100 => ProduceError::TransactionAborted,
                _ => NOT_SENT,
            };
            assert_eq!(failed.get(&i), Some(&expected), "seed {seed}: record {i}");
        }
        // The next transaction commits.
        h.producer.transactions().unwrap().begin(h.now).unwrap();
        for n in 150..180 {
            h.send(record(n), n).unwrap();
        }
        h.producer.transactions().unwrap().commit(h.now).unwrap();
        let before = h.transactions.len();
        assert!(h.run_until(Duration::from_secs(60), |h| h.transactions.len() > before));
        assert_eq!(h.transactions[before].result, Ok(()));
        let mut committed: Vec<u32> = (0..PARTITIONS)
            .flat_map(|p| h.cluster.read_committed(TOPIC, p))
            .map(|r| {
                std::str::from_utf8(r.value.as_deref().unwrap())
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        committed.sort_unstable();
        assert_eq!(committed, (150..180).collect::<Vec<u32>>(), "seed {seed}");
        check_reports(&h, 180);
    }
}

/// A close with a deadline while one broker holds every answer: the close completes at the
/// deadline in virtual time, each record has one report, records in requests to the frozen
/// broker say possibly written, those never sent are in no log, and the counts of
/// `CloseDeadlineReached` are those of the reports.
#[test]
fn close_within_with_a_frozen_broker_ends_at_its_deadline_with_honest_reports() {
    for seed in 1..=4 {
        let mut h = harness(seed, |b| b.linger(Duration::from_millis(5)));
        let mut n = 0u32;
        for _ in 0..100 {
            h.send(record(n), n).unwrap();
            n += 1;
        }
        assert!(h.flush(Duration::from_secs(30)));
        h.cluster.stall_connections_to(2, None).unwrap();
        for _ in 0..600 {
            h.send(record(n), n).unwrap();
            n += 1;
            if n % 50 == 0 {
                h.run_for(Duration::from_millis(6));
            }
        }
        let deadline = h.now + Duration::from_secs(3);
        h.producer.close_within(h.now, deadline);
        assert!(h.run_until(Duration::from_secs(60), |h| h.producer.is_closed()));
        assert_eq!(
            h.now, deadline,
            "seed {seed}: closed at the deadline (virtual time)"
        );
        let failed = check_reports(&h, n);
        let purged = failed.values().filter(|e| **e == NOT_SENT).count();
        let timed_out = failed
            .values()
            .filter(|e| {
                **e == ProduceError::CloseTimedOut {
                    possibly_persisted: true,
                }
            })
            .count();
        assert_eq!(purged + timed_out, failed.len(), "{failed:?}");
        assert!(
            timed_out > 0 && purged > 0,
            "seed {seed}: {timed_out} / {purged}"
        );
        let i = h
            .events
            .iter()
            .position(|e| *e == Event::CloseDeadlineReached { purged, timed_out })
            .expect("the deadline's counts are the reports'");
        assert_eq!(h.events[i + 1], Event::Closed);
        // The frozen broker handled the requests it read: some records reported timed out
        // are in its log, which their possibly_persisted = true allows.
        let delivered = h.deliveries.iter().filter(|d| d.result.is_ok()).count();
        assert!(delivered >= 100, "seed {seed}");
    }
}

/// `flush_within` completes with `FlushCompleted` after the last report when the cluster
/// answers, and times out with the count still unacknowledged when a broker is frozen;
/// nothing is cancelled then: the records are delivered once the broker answers again.
#[test]
fn flush_within_reports_completion_or_its_deadline() {
    let mut h = harness(3, |b| b.linger(Duration::from_secs(600)));
    for n in 0..200 {
        h.send(record(n), n).unwrap();
    }
    h.producer
        .flush_within(h.now, h.now + Duration::from_secs(10));
    assert!(h.run_until(Duration::from_secs(20), |h| h
        .events
        .contains(&Event::FlushCompleted)));
    assert_eq!(h.deliveries.len(), 200, "the event comes after the reports");
    assert!(!h
        .events
        .iter()
        .any(|e| matches!(e, Event::FlushTimedOut { .. })));

    h.cluster.stall_connections_to(1, None).unwrap();
    for n in 200..400 {
        h.send(record(n), n).unwrap();
    }
    let deadline = h.now + Duration::from_secs(2);
    h.producer.flush_within(h.now, deadline);
    let timed_out = |h: &Harness<u32>| {
        h.events.iter().find_map(|e| match e {
            Event::FlushTimedOut { unacknowledged } => Some(*unacknowledged),
            _ => None,
        })
    };
    assert!(h.run_until(Duration::from_secs(20), |h| timed_out(h).is_some()));
    assert_eq!(h.now, deadline);
    let left = timed_out(&h).unwrap();
    assert!(left > 0 && left < 200, "broker 1's records wait: {left}");
    assert_eq!(left, h.producer.unacknowledged_records());
    assert_eq!(
        h.events
            .iter()
            .filter(|e| **e == Event::FlushCompleted)
            .count(),
        1,
        "the second flush did not complete"
    );
    h.cluster.unstall_connections_to(1, h.now).unwrap();
    assert!(h.flush(Duration::from_secs(60)));
    let failed = check_reports(&h, 400);
    assert!(failed.is_empty(), "nothing was cancelled: {failed:?}");
}

/// A transactional producer abandons batches in flight on a stalled broker (which writes
/// them: a stall holds its answers only): the purge aborts the transaction, the application's
/// abort completes once the broker answers again, nothing of the transaction is committed, and
/// the next transaction commits. (The rule that the abort's EndTxn waits for the abandoned
/// Produce requests to end is not what makes this pass: the simulated broker has written them
/// before any EndTxn can reach it.)
#[test]
fn abandon_inside_a_transaction_aborts_it() {
    for seed in 1..=3 {
        let mut h = harness(seed, |b| {
            b.transactional_id("abandoning")
                .linger(Duration::from_millis(2))
                .request_timeout(Duration::from_secs(5))
        });
        h.producer.transactions().unwrap().init(h.now).unwrap();
        assert!(h.run_until(Duration::from_secs(30), |h| !h.transactions.is_empty()));
        assert_eq!(h.transactions[0].result, Ok(()));
        h.producer.transactions().unwrap().begin(h.now).unwrap();
        for n in 0..50 {
            h.send(record(n), n).unwrap();
        }
        h.run_for(Duration::from_millis(200));
        h.cluster.stall_connections_to(1, None).unwrap();
        for n in 50..400 {
            h.send(record(n), n).unwrap();
            if n % 50 == 0 {
                h.run_for(Duration::from_millis(3));
            }
        }
        h.run_for(Duration::from_millis(20));
        let removed = h.producer.purge(h.now, PurgeScope::All, InFlight::Abandon);
        assert!(removed > 0, "seed {seed}");
        h.drain();
        let abandoned = h
            .deliveries
            .iter()
            .filter(|d| {
                matches!(&d.result,
                    Err(f) if f.error == ProduceError::Purged { possibly_persisted: true })
            })
            .count();
        assert!(
            abandoned > 0,
            "seed {seed}: batches in flight were abandoned"
        );
        let before = h.transactions.len();
        h.producer.transactions().unwrap().abort(h.now).unwrap();
        h.run_for(Duration::from_millis(100));
        h.cluster.unstall_connections_to(1, h.now).unwrap();
        assert!(h.run_until(Duration::from_secs(60), |h| h.transactions.len() > before));
        assert_eq!(h.transactions[before].result, Ok(()), "seed {seed}");
        assert_eq!(h.producer.buffered_records(), 0);
        h.producer.transactions().unwrap().begin(h.now).unwrap();
        for n in 400..450 {
            h.send(record(n), n).unwrap();
        }
        h.producer.transactions().unwrap().commit(h.now).unwrap();
        let before = h.transactions.len();
        assert!(h.run_until(Duration::from_secs(60), |h| h.transactions.len() > before));
        assert_eq!(h.transactions[before].result, Ok(()), "seed {seed}");
        let failed = check_reports(&h, 450);
        assert!((400..450).all(|i| !failed.contains_key(&i)));
        assert!((0..400).all(|i| failed.contains_key(&i)), "seed {seed}");
        let mut committed: Vec<u32> = (0..PARTITIONS)
            .flat_map(|p| h.cluster.read_committed(TOPIC, p))
            .filter(|r| r.control.is_none())
            .map(|r| {
                std::str::from_utf8(r.value.as_deref().unwrap())
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        committed.sort_unstable();
        assert_eq!(committed, (400..450).collect::<Vec<u32>>(), "seed {seed}");
    }
}
