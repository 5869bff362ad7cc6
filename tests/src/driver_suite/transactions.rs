//! The threaded drivers' transactional handles (`ProducerHandle::transactions`,
//! `ThreadedProducer::transactions`) against librdkafka's mock cluster: a producer has one
//! only with a `transactional.id`, and its calls reach the core's transactional state machine
//! in order. (The transactions themselves under faults: `tests/tests/mock_transactions.rs`,
//! and against Apache Kafka `tests/tests/kafka_transactions.rs`.)

use producer_core::{
    ProduceError, Record, SendErrorReason, TransactionError, TransactionOperation, TransactionState,
};

use crate::drive::{Driver, Failure};
use crate::running::{Options, Running, HANG_GUARD};
use crate::MockKafka;

const TOPIC: &str = "txn-handle";

fn record(id: u64) -> Record {
    Record::new(TOPIC, format!("value-{id}")).with_key(format!("key-{id}"))
}

/// Record `id` came back as it was sent (the driver may have given it a timestamp).
fn assert_handed_back(back: Option<Record>, id: u64) {
    let mut back = back.unwrap_or_else(|| panic!("record {id} not handed back"));
    back.timestamp = None;
    assert_eq!(back, record(id), "record {id} handed back");
}

/// Without a `transactional.id` the handle has no transactional API (before, stopped), and
/// its records need no transaction. With one, the handle's calls are the core's operations:
/// `begin` before `init` and a second `init` are refused with the state they found, a
/// record outside a transaction is refused with `NoTransaction` and handed back, a committed
/// transaction's records are reported `committed`, an aborted one's fail with
/// `TransactionAborted` and come back, and once the producer stopped every call is refused
/// as closed.
pub fn transactions_exist_only_with_a_transactional_id(driver: Driver) {
    let mock = MockKafka::new(3, &[(TOPIC, 3)]).expect("mock cluster");

    let plain = Running::start(
        driver,
        Options::new(mock.producer_config().build().unwrap()),
    );
    assert!(plain.transactions().is_none(), "not transactional");
    plain.send(record(0), 0).expect("open");
    plain.flush();
    let r = plain.next_report(HANG_GUARD).expect("a report");
    assert!(
        matches!(&r.result, Ok(m) if !m.committed),
        "delivered outside any transaction: {:?}",
        r.result
    );
    plain.close();
    assert!(plain.transactions().is_none(), "still none once stopped");

    let config = mock
        .producer_config()
        .transactional_id(format!("txn-handle-{driver:?}"))
        .build()
        .unwrap();
    let p = Running::start(driver, Options::new(config));
    let txn = p.transactions().expect("transactional");
    assert_eq!(
        txn.begin(),
        Err(TransactionError::InvalidState {
            operation: TransactionOperation::Begin,
            state: TransactionState::Uninitialized,
        }),
        "begin before init"
    );
    txn.init().expect("init");
    assert_eq!(
        txn.init(),
        Err(TransactionError::InvalidState {
            operation: TransactionOperation::Init,
            state: TransactionState::Ready,
        }),
        "a second init"
    );
    p.send(record(1), 1).expect("queued");
    let r = p.next_report(HANG_GUARD).expect("a report");
    assert_eq!(r.id, 1);
    assert!(
        matches!(
            r.result,
            Err(Failure::Rejected(SendErrorReason::NoTransaction))
        ),
        "a record outside a transaction: {:?}",
        r.result
    );
    assert_handed_back(r.record, 1);

    txn.begin().expect("begin");
    for id in 2..6 {
        p.send(record(id), id).expect("queued");
    }
    txn.commit().expect("commit");
    let committed = p.reports();
    let mut ids: Vec<u64> = committed.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [2, 3, 4, 5],
        "every report came before the commit returned: {committed:?}"
    );
    for r in &committed {
        assert!(
            matches!(&r.result, Ok(m) if m.committed),
            "record {}: {:?}",
            r.id,
            r.result
        );
    }

    txn.begin().expect("begin");
    for id in 6..9 {
        p.send(record(id), id).expect("queued");
    }
    txn.abort().expect("abort");
    for _ in 6..9 {
        let r = p.next_report(HANG_GUARD).expect("a report");
        assert!(
            matches!(
                r.result,
                Err(Failure::Produce(ProduceError::TransactionAborted))
            ),
            "record {}: {:?}",
            r.id,
            r.result
        );
        assert_handed_back(r.record, r.id);
    }

    p.close();
    assert_eq!(txn.begin(), Err(TransactionError::Closed), "stopped");
    assert!(p.reports().is_empty(), "no other report");
}
