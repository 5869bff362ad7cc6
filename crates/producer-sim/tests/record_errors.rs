//! Per-record errors (KIP-467): a compacted topic rejects a batch holding records without a key
//! with INVALID_RECORD and one record error per such record. Each of those is reported with
//! its own `InvalidRecord`, its batch mates with `BatchRejected`, every record handed back as
//! sent; nothing is retried, and the partition's later batches still succeed (idempotence on).

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use producer_core::{ErrorCode, ProduceError, Record};
use producer_sim::{SimCluster, SimConfig, API_PRODUCE};
use support::run::*;

const TOPIC: &str = "table";
const NO_KEY: &str = "Compacted topic cannot accept message without key in topic partition table-0";

fn compacted_cluster(seed: u64) -> SimCluster {
    let mut c = SimCluster::new(SimConfig::with_brokers(1, seed), Instant::now());
    c.create_topic_with_config(TOPIC, 1, &[("cleanup.policy", "compact")])
        .unwrap();
    c
}

fn keyed(id: u64) -> Record {
    record(id, TOPIC, true)
}

fn unkeyed(id: u64) -> Record {
    record(id, TOPIC, false)
}

/// The failure of record `id`, with the record handed back.
fn failure(h: &producer_sim::drive::Harness<u64>, id: u64) -> (ProduceError, Record) {
    let mut found = h.deliveries.iter().filter(|d| d.opaque == id);
    let d = found
        .next()
        .unwrap_or_else(|| panic!("record {id}: no report"));
    assert!(found.next().is_none(), "record {id} reported twice");
    let f = d.result.as_ref().expect_err("a failure");
    (f.error.clone(), f.record.clone())
}

/// The values of the partition's log, in offset order.
fn logged_ids(c: &SimCluster) -> Vec<u64> {
    c.log(TOPIC, 0)
        .iter()
        .map(|r| id_of(r.value.as_deref().unwrap()))
        .collect()
}

#[test]
fn a_mixed_batch_reports_each_record_and_the_partition_goes_on() {
    let mut h = harness(compacted_cluster(7), |b| {
        b.linger(Duration::from_secs(5)).batch_size(64 * 1024)
    });
    // Metadata and a producer id first.
    h.send(keyed(100), 100).unwrap();
    assert!(h.flush(secs(10)));
    assert!(h.deliveries[0].result.is_ok());

    // One batch: records 1 and 4 have no key.
    let sent: Vec<Record> = (1..=6)
        .map(|id| match id {
            1 | 4 => unkeyed(id),
            3 => keyed(id).with_header("h", Some(Bytes::from_static(b"v"))),
            _ => keyed(id),
        })
        .collect();
    for (id, r) in (1..=6).zip(&sent) {
        h.send(r.clone(), id).unwrap();
    }
    assert!(h.flush(secs(10)));

    // The broker saw one batch of six records, rejected once and never retried.
    let produced: Vec<_> = h
        .cluster
        .request_log()
        .iter()
        .filter(|r| r.api_key == API_PRODUCE)
        .flat_map(|r| r.produce.iter())
        .filter(|p| p.error_code != 0)
        .collect();
    assert_eq!(produced.len(), 1, "{produced:?}");
    assert_eq!(produced[0].record_count, 6);
    assert_eq!(produced[0].error_code, ErrorCode::INVALID_RECORD.0);

    for (id, r) in (1..=6).zip(&sent) {
        let (error, back) = failure(&h, id);
        assert_eq!(&back, r, "record {id} handed back as sent");
        match id {
            1 | 4 => assert_eq!(
                error,
                ProduceError::InvalidRecord {
                    code: ErrorCode::INVALID_RECORD,
                    batch_index: id as i32 - 1,
                    message: Some(NO_KEY.into()),
                    possibly_persisted: false,
                },
                "record {id}"
            ),
            _ => match error {
                ProduceError::BatchRejected {
                    code: ErrorCode::INVALID_RECORD,
                    invalid_records: 2,
                    message: Some(m),
                    possibly_persisted: false,
                } => assert!(
                    m.starts_with("One or more records have been rejected due to 2 record errors"),
                    "record {id}: {m}"
                ),
                other => panic!("record {id}: {other:?}"),
            },
        }
    }
    assert_eq!(
        logged_ids(&h.cluster),
        [100],
        "nothing of the batch written"
    );
    let m = h.producer.metrics();
    assert_eq!(m.counters.records_failed, 6);
    assert_eq!(m.counters.records_invalid, 2);
    assert_eq!(m.errors_with(ErrorCode::INVALID_RECORD), 1, "one per batch");
    let mut text = String::new();
    m.render_prometheus(&mut text);
    assert!(
        text.contains("\nkafka_producer_invalid_records_total 2\n"),
        "{text}"
    );

    // The application resends the good records, as handed back, and a new one.
    let resent: Vec<(u64, Record)> = [2, 3, 5, 6]
        .into_iter()
        .map(|id| (id, failure(&h, id).1))
        .chain([(7, keyed(7))])
        .collect();
    for (id, r) in &resent {
        h.send(r.clone(), 1000 + id).unwrap();
    }
    assert!(h.flush(secs(10)));
    for (id, _) in &resent {
        let d = h.deliveries.iter().find(|d| d.opaque == 1000 + id).unwrap();
        assert!(d.result.is_ok(), "resent record {id}: {:?}", d.result);
    }
    assert_eq!(logged_ids(&h.cluster), [100, 2, 3, 5, 6, 7]);
    let log = h.cluster.log(TOPIC, 0);
    assert_eq!(
        log[2].headers,
        [("h".to_string(), Some(Bytes::from_static(b"v")))]
    );
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
    assert_eq!(h.producer.buffered_records(), 0);
}

/// Small batches, five requests in flight: the batches sent behind a rejected one carry the
/// sequences after it, which the broker never took. They must still be written, once each and
/// in order; only the records of rejected batches fail.
#[test]
fn batches_behind_a_rejected_one_are_written_once_in_order() {
    let mut h = harness(compacted_cluster(11), |b| {
        b.linger(Duration::from_millis(1))
            .batch_size(256)
            .max_in_flight(5)
            // Every record is sent at once (the sequences are the subject): the queue-delay
            // limit, whose floor is a few 256-byte batches, would refuse some as `Full`.
            .queue_delay_target(Duration::ZERO)
            // Many small batches in flight behind the rejected one are the case: batches
            // that grow while the slots are busy would make few large ones.
            .batch_grow_max(0)
    });
    let n = 120;
    let keyless = |id: u64| id % 13 == 5;
    for id in 0..n {
        let r = if keyless(id) { unkeyed(id) } else { keyed(id) };
        h.send(r, id).unwrap();
        if id % 4 == 3 {
            h.run_for(Duration::from_millis(1));
        }
    }
    // Every record reported: no batch retried for ever behind a rejected one.
    assert!(h.flush(secs(60)));
    assert!(
        h.contract_violations.is_empty(),
        "{:?}",
        h.contract_violations
    );

    let mut delivered = Vec::new();
    let (mut invalid, mut rejected) = (0u64, 0u64);
    for id in 0..n {
        let mut ds = h.deliveries.iter().filter(|d| d.opaque == id);
        let d = ds
            .next()
            .unwrap_or_else(|| panic!("record {id}: no report"));
        assert!(ds.next().is_none(), "record {id} reported twice");
        match &d.result {
            Ok(_) => {
                assert!(!keyless(id), "record {id} without a key delivered");
                delivered.push(id);
            }
            Err(f) => {
                assert_eq!(id_of(f.record.value.as_deref().unwrap()), id);
                match &f.error {
                    ProduceError::InvalidRecord { message, .. } if keyless(id) => {
                        assert_eq!(message.as_deref(), Some(NO_KEY));
                        invalid += 1;
                    }
                    ProduceError::BatchRejected { .. } if !keyless(id) => rejected += 1,
                    other => panic!("record {id}: {other:?}"),
                }
            }
        }
    }
    assert_eq!(invalid, (0..n).filter(|&id| keyless(id)).count() as u64);
    // The rejected batches are the INVALID_RECORD answers, each never retried.
    let in_rejected: i64 = h
        .cluster
        .request_log()
        .iter()
        .flat_map(|r| r.produce.iter())
        .filter(|p| p.error_code == ErrorCode::INVALID_RECORD.0)
        .map(|p| i64::from(p.record_count))
        .sum();
    assert_eq!(in_rejected as u64, invalid + rejected);
    assert!(
        rejected > 0,
        "no keyed record shared a batch with a keyless one"
    );
    // The case this test is for happened: batches in flight behind a rejected one were
    // refused for their sequence under the old epoch, then written after the reset.
    assert!(h
        .cluster
        .request_log()
        .iter()
        .flat_map(|r| r.produce.iter())
        .any(|p| p.error_code == ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER.0));
    assert_eq!(
        logged_ids(&h.cluster),
        delivered,
        "written once each, in order"
    );
    let m = h.producer.metrics();
    assert_eq!(m.counters.records_invalid, invalid);
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
}

#[test]
fn the_simulator_refuses_topic_configs_it_does_not_model() {
    let mut c = SimCluster::new(SimConfig::with_brokers(1, 0), Instant::now());
    assert!(c
        .create_topic_with_config("a", 1, &[("cleanup.policy", "compact,delete")])
        .is_ok());
    assert!(c
        .create_topic_with_config("b", 1, &[("cleanup.policy", "shred")])
        .is_err());
    assert!(c
        .create_topic_with_config("c", 1, &[("retention.ms", "1")])
        .is_err());
}

/// The same for the other answers Kafka gives before its producer-state check and append
/// (`UnifiedLog.analyzeAndValidateRecords`, `LogValidator`, and the request checks in
/// `KafkaApis`): a batch refused with one is a certain hole, so the batches in flight behind it
/// are restamped once it fails, not retried under the old epoch until their delivery timeout;
/// here two batches are refused, with batches in flight between them.
#[test]
fn batches_behind_one_refused_before_the_append_are_delivered() {
    for code in [
        ErrorCode::CORRUPT_MESSAGE,
        ErrorCode::RECORD_LIST_TOO_LARGE,
        ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
    ] {
        let mut c = SimCluster::new(SimConfig::with_brokers(1, 13), Instant::now());
        c.create_topic(TOPIC, 1).unwrap();
        // Records sent while the partition retries (nothing drains meanwhile): without the
        // queue-delay limit, which would push back then (tests/queue_delay.rs).
        let mut h = harness(c, |b| {
            b.linger(Duration::from_millis(1))
                .batch_size(256)
                .max_in_flight(5)
                .queue_delay_target(Duration::ZERO)
        });
        // Metadata and a producer id first.
        h.send(keyed(1000), 1000).unwrap();
        assert!(h.flush(secs(10)));
        let start = h.now;
        h.cluster.inject_error(producer_sim::InjectedError {
            api_key: API_PRODUCE,
            topic: Some(TOPIC.into()),
            partition: Some(0),
            error_code: code.0,
            count: 2,
            persist: false,
        });
        let n = 60;
        for id in 0..n {
            h.send(keyed(id), id).unwrap();
            if id % 4 == 3 {
                h.run_for(Duration::from_millis(1));
            }
        }
        assert!(h.flush(secs(200)));
        let (mut delivered, mut failed) = (Vec::new(), 0);
        for id in 0..n {
            let d = h.deliveries.iter().find(|d| d.opaque == id).unwrap();
            match &d.result {
                Ok(_) => delivered.push(id),
                Err(f) => {
                    assert!(
                        matches!(&f.error, ProduceError::Broker { code: c, .. } if *c == code),
                        "{code}: record {id}: {:?}",
                        f.error
                    );
                    failed += 1;
                }
            }
        }
        // Only the refused batch failed, and the rest came well before the delivery timeout
        // (simulated time).
        assert!(failed > 0 && failed < 20, "{code}: {failed} failed");
        assert!(
            h.now - start < Duration::from_secs(60),
            "{code}: reports took {:?} of simulated time",
            h.now - start
        );
        let mut logged = logged_ids(&h.cluster);
        logged.retain(|&id| id != 1000);
        assert_eq!(logged, delivered, "{code}: written once each, in order");
        assert!(
            h.cluster.violations().is_empty(),
            "{:?}",
            h.cluster.violations()
        );
    }
}
