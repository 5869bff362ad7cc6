//! The drivers' transactional handles (tokio's, mio's threaded and embeddable producers')
//! against librdkafka's mock cluster (its transaction
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

use mio::Token;
use producer_core::{
    Delivery, ProduceError, Record, TransactionError, TransactionOperation, TransactionResult,
};
use producer_mio::{MioDriver, TokenRange};
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
/// The reports of `range` after its transaction ended: one each, committed or failed
/// `TransactionAborted` with the record handed back, as `commit` says.
fn assert_transaction_ended(reports: &[Delivery<u64>], range: &std::ops::Range<u64>, commit: bool) {
    let ended: Vec<_> = reports
        .iter()
        .filter(|d| range.contains(&d.opaque))
        .collect();
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
        let txn = p.transactions().expect("a transactional.id");
        txn.init().await.expect("init");
        let mut committed = HashSet::new();
        let mut aborted = HashSet::new();
        for (t, (range, commit)) in [(0..200u64, true), (200..300, false), (300..350, true)]
            .into_iter()
            .enumerate()
        {
            txn.begin().await.unwrap();
            let mut reports = Vec::new();
            for i in range.clone() {
                reports.push((i, p.send(record(i)).await.unwrap()));
            }
            p.flush().await; // every record acknowledged, none reported yet
            if commit {
                txn.commit()
                    .await
                    .unwrap_or_else(|e| panic!("commit {t}: {e}"));
            } else {
                txn.abort()
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
    let txn = p.transactions().expect("a transactional.id");
    txn.init().expect("init");
    for (range, commit) in [(0..120u64, true), (120..180, false), (180..200, true)] {
        txn.begin().unwrap();
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
            txn.commit().unwrap();
        } else {
            txn.abort().unwrap();
        }
        // The end's reports all reached the callback before it returned.
        assert_transaction_ended(&reports.lock().unwrap(), &range, commit);
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

/// Runs `driver`'s loop (the application's, as `MioDriver` is embedded) until the
/// transactional operation under way completes, collecting the reports on the way.
fn run_until_done(
    driver: &mut MioDriver<u64>,
    poll: &mut mio::Poll,
    reports: &mut Vec<Delivery<u64>>,
) -> TransactionResult {
    loop {
        // A commit's reports come out just before its result.
        while let Some(d) = driver.poll_delivery() {
            reports.push(d);
        }
        if let Some(r) = driver.poll_transaction() {
            return r;
        }
        run_loop_once(driver, poll);
    }
}

/// The same through producer-mio's embeddable `MioDriver`: each operation returns once
/// accepted (`begin` when done), its result comes out of `poll_transaction` while the
/// application's loop runs, a committed transaction's reports (`committed` set) come out
/// before its result, an aborted one's records fail with `TransactionAborted` and come back.
/// Each transaction is flushed before its end, so the log holds every record sent.
#[test]
fn mio_driver_commits_aborts_and_commits_again() {
    producer_tests::running::with_hang_guard(|| {
        let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).unwrap();
        let config = mock
            .producer_config()
            .transactional_id("mock-mio-driver")
            .build()
            .unwrap();
        let mut poll = mio::Poll::new().unwrap();
        let mut driver =
            MioDriver::<u64>::new(config, poll.registry(), TokenRange::new(Token(0), 64)).unwrap();
        let mut reports = Vec::new();
        driver
            .transactions()
            .expect("a transactional.id")
            .init()
            .expect("init accepted");
        let r = run_until_done(&mut driver, &mut poll, &mut reports);
        assert_eq!(
            (r.operation, r.result),
            (TransactionOperation::Init, Ok(()))
        );
        for (range, commit) in [(0..120u64, true), (120..180, false), (180..200, true)] {
            driver
                .transactions()
                .expect("a transactional.id")
                .begin()
                .expect("begin");
            assert!(
                driver.poll_transaction().is_none(),
                "begin has no result to poll"
            );
            for i in range.clone() {
                driver.send(record(i), i).expect("room for every record");
            }
            // Written first (acknowledged), so the log holds the aborted records too.
            driver.flush();
            while driver.core().unacknowledged_records() > 0 {
                run_loop_once(&mut driver, &mut poll);
            }
            while let Some(d) = driver.poll_delivery() {
                reports.push(d);
            }
            assert!(
                reports.iter().all(|d| !range.contains(&d.opaque)),
                "acknowledged, but nothing reported before the end"
            );
            let mut txn = driver.transactions().expect("a transactional.id");
            let (op, accepted) = if commit {
                (TransactionOperation::Commit, txn.commit())
            } else {
                (TransactionOperation::Abort, txn.abort())
            };
            accepted.expect("accepted");
            let r = run_until_done(&mut driver, &mut poll, &mut reports);
            assert_eq!((r.operation, r.result), (op, Ok(())));
            assert_transaction_ended(&reports, &range, commit);
        }
        assert_eq!(reports.len(), 200, "one report per record");
        driver.close();
        while !driver.is_closed() {
            run_loop_once(&mut driver, &mut poll);
        }
        let committed: HashSet<u64> = (0..120).chain(180..200).collect();
        check_log(&mock, &committed, 200);
    });
}

/// One turn of `driver`'s loop.
fn run_loop_once(driver: &mut MioDriver<u64>, poll: &mut mio::Poll) {
    let mut events = mio::Events::with_capacity(64);
    poll.poll(&mut events, driver.next_timeout()).unwrap();
    for event in events.iter() {
        if driver.owns_token(event.token()) {
            driver.handle_event(event);
        }
    }
    driver.handle_timeout();
}

/// Each broker answers its next EndTxn only after `delay` (only the coordinator's is used).
fn delay_end_txn(mock: &MockKafka, delay: Duration) {
    for b in 1..=mock.broker_count() {
        mock.push_broker_request_errors(b, API_END_TXN, &[(0, delay)])
            .unwrap();
    }
}

/// With `max.block.ms` 300 ms.
const MAX_BLOCK: Duration = Duration::from_millis(300);
/// How long the coordinator takes to answer the commit: far past `MAX_BLOCK`, so the first
/// call times out.
const END_TXN_DELAY: Duration = Duration::from_secs(4);

fn is_commit_timeout(r: &Result<(), TransactionError>) -> bool {
    matches!(
        r,
        Err(TransactionError::OperationTimedOut {
            operation: TransactionOperation::Commit,
            max_block_ms: 300
        })
    )
}

/// A commit whose EndTxn the coordinator answers late: through the tokio driver, the call
/// returns the typed timeout (the driver has no timer of its own: the core's), every other
/// operation is refused, and the commit called again completes. The records are committed.
#[test]
fn tokio_a_timed_out_commit_is_called_again_and_completes() {
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).unwrap();
    let config = mock
        .producer_config()
        .transactional_id("mock-tokio-block")
        .max_block(MAX_BLOCK)
        .build()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let p = producer_tokio::ProducerHandle::start(config).unwrap();
        let txn = p.transactions().expect("a transactional.id");
        txn.init().await.expect("init");
        txn.begin().await.unwrap();
        let mut reports = Vec::new();
        for i in 0..50 {
            reports.push(p.send(record(i)).await.unwrap());
        }
        p.flush().await;
        delay_end_txn(&mock, END_TXN_DELAY);
        let first = txn.commit().await;
        assert!(is_commit_timeout(&first), "{first:?}");
        let busy = Err(TransactionError::InProgress {
            operation: TransactionOperation::Commit,
        });
        assert_eq!(txn.begin().await, busy);
        assert_eq!(txn.abort().await, busy);
        let mut timeouts = 1;
        loop {
            let r = txn.commit().await;
            if is_commit_timeout(&r) {
                timeouts += 1;
                continue;
            }
            assert_eq!(r, Ok(()));
            break;
        }
        for (i, r) in reports.into_iter().enumerate() {
            let m = r.await.unwrap_or_else(|e| panic!("record {i}: {e}"));
            assert!(m.committed);
        }
        println!("tokio: the commit returned its timeout {timeouts} times, then completed");
        p.close().await;
    });
    check_log(&mock, &(0..50).collect(), 50);
}

/// The same through producer-mio's ThreadedProducer.
#[test]
fn mio_threaded_a_timed_out_commit_is_called_again_and_completes() {
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).unwrap();
    let config = mock
        .producer_config()
        .transactional_id("mock-mio-block")
        .max_block(MAX_BLOCK)
        .build()
        .unwrap();
    let reports: Arc<Mutex<Vec<Delivery<u64>>>> = Arc::default();
    let sink = reports.clone();
    let p = producer_mio::ThreadedProducer::<u64>::spawn(config, 10_000, move |d| {
        sink.lock().unwrap().push(d)
    })
    .unwrap();
    let txn = p.transactions().expect("a transactional.id");
    txn.init().expect("init");
    txn.begin().unwrap();
    for i in 0..50 {
        p.send_with(record(i), i).unwrap();
    }
    p.flush();
    delay_end_txn(&mock, END_TXN_DELAY);
    let first = txn.commit();
    assert!(is_commit_timeout(&first), "{first:?}");
    let busy = Err(TransactionError::InProgress {
        operation: TransactionOperation::Commit,
    });
    assert_eq!(txn.begin(), busy);
    assert_eq!(txn.abort(), busy);
    let mut timeouts = 1;
    loop {
        let r = txn.commit();
        if is_commit_timeout(&r) {
            timeouts += 1;
            continue;
        }
        assert_eq!(r, Ok(()));
        break;
    }
    // The commit's reports reached the callback before the call returned.
    let got = reports.lock().unwrap().len();
    assert_eq!(got, 50);
    assert!(reports
        .lock()
        .unwrap()
        .iter()
        .all(|d| matches!(&d.result, Ok(m) if m.committed)));
    println!("mio: the commit returned its timeout {timeouts} times, then completed");
    p.close();
    check_log(&mock, &(0..50).collect(), 50);
}
