//! Both drivers' transactional APIs against librdkafka's mock cluster (its transaction
//! coordinator, classic transaction version: no finalized features in its ApiVersions): a
//! committed, an aborted and a committed transaction, each record's report, and a retriable
//! EndTxn error on the way. The mock keeps aborted records visible (it writes no control
//! batches a consumer filters by), so the read-back checks only that every committed record
//! is in the log once, in send order; what read_committed shows is proven by the strict parties,
//! the simulated cluster (`producer-sim/tests/transactions.rs`) and Apache Kafka
//! (`kafka_transactions.rs`). This one runs without either, in seconds.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use producer_core::{Delivery, ProduceError, Record};
use producer_tests::mock::MockKafka;
use producer_tests::read_back_all;

const TOPIC: &str = "txn";
const PARTITIONS: i32 = 3;
/// CONCURRENT_TRANSACTIONS, retried by the producer.
const CONCURRENT_TRANSACTIONS: i32 = 51;
const API_END_TXN: i16 = 26;

fn record(i: u64) -> Record {
    Record::new(TOPIC, format!("v{i:06}")).with_key(format!("k{}", i % 7))
}

fn id_of(value: &[u8]) -> u64 {
    std::str::from_utf8(&value[1..]).unwrap().parse().unwrap()
}

/// Checks that every id of `committed` is in the topic once, each partition's in send order.
fn check_log(mock: &MockKafka, committed: &HashSet<u64>, total: usize) {
    let read = read_back_all(
        &mock.bootstrap_servers(),
        TOPIC,
        PARTITIONS,
        Duration::from_secs(30),
    );
    let mut last = std::collections::HashMap::new();
    let mut ids = HashSet::new();
    for r in &read {
        let id = id_of(r.value.as_deref().unwrap());
        if let Some(prev) = last.insert(r.partition, id) {
            assert!(prev < id, "partition {} out of send order", r.partition);
        }
        assert!(ids.insert(id), "record {id} written twice");
    }
    assert!(committed.is_subset(&ids), "a committed record is missing");
    assert_eq!(ids.len(), total, "the log holds every record sent");
}

#[test]
fn tokio_commits_aborts_and_commits_again() {
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).unwrap();
    mock.push_request_errors(API_END_TXN, &[CONCURRENT_TRANSACTIONS]);
    let config = mock
        .producer_config()
        .transactional_id("mock-tokio")
        .build()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (committed, aborted) = rt.block_on(async {
        let p = producer_tokio::ProducerHandle::start(config).unwrap();
        p.init_transactions().await.expect("init_transactions");
        let mut committed = HashSet::new();
        let mut aborted = HashSet::new();
        for (t, (range, commit)) in [(0..200u64, true), (200..300, false), (300..350, true)]
            .into_iter()
            .enumerate()
        {
            p.begin_transaction().await.unwrap();
            let mut reports = Vec::new();
            for i in range.clone() {
                reports.push((i, p.send(record(i)).await.unwrap()));
            }
            p.flush().await; // every record acknowledged, none reported yet
            if commit {
                p.commit_transaction()
                    .await
                    .unwrap_or_else(|e| panic!("commit {t}: {e}"));
            } else {
                p.abort_transaction()
                    .await
                    .unwrap_or_else(|e| panic!("abort {t}: {e}"));
            }
            for (i, r) in reports {
                match r.await {
                    Ok(m) => {
                        assert!(commit && m.committed, "record {i} delivered, committed");
                        committed.insert(i);
                    }
                    Err(e) => {
                        assert!(!commit, "record {i} of a committed transaction failed: {e}");
                        assert_eq!(e.error(), Some(&ProduceError::TransactionAborted));
                        assert_eq!(id_of(e.record().unwrap().value.as_deref().unwrap()), i);
                        aborted.insert(i);
                    }
                }
            }
        }
        p.close().await;
        (committed, aborted)
    });
    assert_eq!((committed.len(), aborted.len()), (250, 100));
    check_log(&mock, &committed, 350);
}

#[test]
fn mio_threaded_commits_aborts_and_commits_again() {
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).unwrap();
    let config = mock
        .producer_config()
        .transactional_id("mock-mio")
        .build()
        .unwrap();
    let reports: Arc<Mutex<Vec<Delivery<u64>>>> = Arc::default();
    let sink = reports.clone();
    let p = producer_mio::ThreadedProducer::<u64>::spawn(config, 10_000, move |d| {
        sink.lock().unwrap().push(d)
    })
    .unwrap();
    p.init_transactions().expect("init_transactions");
    for (range, commit) in [(0..120u64, true), (120..180, false), (180..200, true)] {
        p.begin_transaction().unwrap();
        for i in range.clone() {
            p.send_with(record(i), i).unwrap();
        }
        p.flush();
        // Acknowledged, but nothing reported before the end.
        assert!(reports
            .lock()
            .unwrap()
            .iter()
            .all(|d| !range.contains(&d.opaque)));
        if commit {
            p.commit_transaction().unwrap();
        } else {
            p.abort_transaction().unwrap();
        }
        // The end's reports all reached the callback before it returned.
        let got = reports.lock().unwrap();
        let ended: Vec<_> = got.iter().filter(|d| range.contains(&d.opaque)).collect();
        assert_eq!(ended.len() as u64, range.end - range.start);
        for d in ended {
            match &d.result {
                Ok(m) => assert!(commit && m.committed),
                Err(f) => {
                    assert!(!commit);
                    assert_eq!(f.error, ProduceError::TransactionAborted);
                    assert_eq!(id_of(f.record.value.as_deref().unwrap()), d.opaque);
                }
            }
        }
    }
    // A record outside a transaction comes back in its report.
    p.send_with(record(999), 999).unwrap();
    p.close();
    let got = reports.lock().unwrap();
    let refused = got.iter().find(|d| d.opaque == 999).expect("a report");
    assert!(matches!(
        &refused.result,
        Err(f) if matches!(&f.error, ProduceError::Refused(r) if **r == producer_core::SendErrorReason::NoTransaction)
    ));
    let committed: HashSet<u64> = (0..120).chain(180..200).collect();
    check_log(&mock, &committed, 200);
}
