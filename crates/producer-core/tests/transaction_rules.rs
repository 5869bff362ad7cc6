//! The transactional API's local rules, which need no broker: what each state allows, what a
//! refused call says, and that a refused record comes back. (Against brokers: the simulated
//! cluster's coordinator in `producer-sim/tests/transactions.rs`, Apache Kafka in
//! `tests/tests/kafka_transactions.rs`.)

use std::time::Instant;

use producer_core::{
    Config, ConfigError, ConsumerGroupMetadata, InvalidOffsets, InvalidTopicName, OffsetToCommit,
    Producer, Record, SendErrorReason, TransactionError, TransactionOperation, TransactionState,
};

fn transactional() -> Producer<u32> {
    let config = Config::builder([("localhost", 9092)])
        .transactional_id("rules-1")
        .build()
        .unwrap();
    Producer::new(config, Instant::now())
}

/// Without a `transactional.id` there is no transactional API to call: the illegal calls are
/// not representable (they were refused with `TransactionError::NotTransactional` before).
#[test]
fn a_producer_without_transactional_id_has_no_transactional_api() {
    let config = Config::builder([("localhost", 9092)]).build().unwrap();
    let mut p = Producer::<u32>::new(config, Instant::now());
    let now = Instant::now();
    assert!(p.transactions().is_none());
    // And its records need no transaction.
    assert!(p.send(now, Record::new("t", "v"), 1).is_ok());
}

#[test]
fn records_outside_an_open_transaction_come_back() {
    let mut p = transactional();
    let now = Instant::now();
    let e = p
        .send(now, Record::new("t", "before init").with_key("k"), 7)
        .unwrap_err();
    assert_eq!(e.reason, SendErrorReason::NoTransaction);
    assert_eq!(e.opaque, 7);
    assert_eq!(e.record.value.as_deref(), Some(&b"before init"[..]));
    assert_eq!(e.record.key.as_deref(), Some(&b"k"[..]));
    assert_eq!(p.buffered_records(), 0);
}

#[test]
fn each_operation_is_refused_in_a_state_that_does_not_allow_it() {
    let mut p = transactional();
    let now = Instant::now();
    for (op, r) in [
        (
            TransactionOperation::Begin,
            p.transactions().unwrap().begin(now),
        ),
        (
            TransactionOperation::Commit,
            p.transactions().unwrap().commit(now),
        ),
        (
            TransactionOperation::Abort,
            p.transactions().unwrap().abort(now),
        ),
        (
            TransactionOperation::SendOffsets,
            p.transactions().unwrap().send_offsets(
                now,
                vec![OffsetToCommit::new("in", 0, 5)],
                ConsumerGroupMetadata::new("g"),
            ),
        ),
    ] {
        assert_eq!(
            r,
            Err(TransactionError::InvalidState {
                operation: op,
                state: TransactionState::Uninitialized
            }),
            "{op} before init_transactions"
        );
    }
    assert_eq!(p.transactions().unwrap().init(now), Ok(()));
    assert_eq!(p.transaction_state(), TransactionState::Initializing);
    // One operation at a time: the init has not completed (no broker answered).
    assert_eq!(
        p.transactions().unwrap().init(now),
        Err(TransactionError::InProgress {
            operation: TransactionOperation::Init
        })
    );
    assert_eq!(
        p.transactions().unwrap().begin(now),
        Err(TransactionError::InProgress {
            operation: TransactionOperation::Init
        })
    );
}

#[test]
fn a_close_before_the_init_completed_fails_it() {
    let mut p = transactional();
    let now = Instant::now();
    p.transactions().unwrap().init(now).unwrap();
    p.close(now);
    let mut results = Vec::new();
    while let Some(o) = p.poll_output() {
        if let producer_core::Output::Transaction(r) = o {
            results.push(r);
        }
    }
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].operation, TransactionOperation::Init);
    assert_eq!(results[0].result, Err(TransactionError::Closed));
    assert_eq!(
        p.transactions().unwrap().begin(now),
        Err(TransactionError::Closed)
    );
}

#[test]
fn transactional_configs_are_checked() {
    let b = || Config::builder([("localhost", 9092)]).transactional_id("x");
    assert_eq!(
        b().enable_idempotence(false).build().unwrap_err(),
        ConfigError::TransactionsNeedIdempotence
    );
    assert_eq!(
        Config::builder([("localhost", 9092)])
            .transactional_id("")
            .build()
            .unwrap_err(),
        ConfigError::EmptyTransactionalId
    );
    assert!(matches!(
        b().transaction_timeout(std::time::Duration::ZERO)
            .build()
            .unwrap_err(),
        ConfigError::InvalidTransactionTimeout(_)
    ));
    let by_name = Config::builder([("localhost", 9092)])
        .set("transactional.id", "by-name")
        .unwrap()
        .set("transaction.timeout.ms", "15000")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(by_name.transactional_id.as_deref(), Some("by-name"));
    assert_eq!(
        by_name.transaction_timeout,
        std::time::Duration::from_secs(15)
    );
    assert!(by_name.idempotence);
    assert!(Config::builder([("localhost", 9092)])
        .set("transactional.id", "")
        .is_err());
}

/// Offsets whose names or metadata no request could carry (longer than an INT16 length says,
/// or a topic outside Kafka's rules) are refused with a typed error before anything is sent;
/// at the limit they pass this check (and meet the state's rule).
#[test]
fn offsets_too_long_for_their_request_are_refused_typed() {
    let mut p = transactional();
    let now = Instant::now();
    let long = "g".repeat(Config::MAX_ID_LEN + 1);
    let at_limit = "g".repeat(Config::MAX_ID_LEN);
    let offsets = || vec![OffsetToCommit::new("in", 0, 5)];
    let member = |member_id: &str, instance: Option<&str>| ConsumerGroupMetadata {
        member_id: member_id.to_string(),
        group_instance_id: instance.map(str::to_string),
        ..ConsumerGroupMetadata::new("g")
    };
    let mut with_metadata = offsets();
    with_metadata[0].metadata = Some(long.clone());
    for (offsets, group, expected) in [
        (
            offsets(),
            ConsumerGroupMetadata::new(long.clone()),
            InvalidOffsets::TooLong {
                field: "group_id",
                len: 32768,
            },
        ),
        (
            offsets(),
            member(&long, None),
            InvalidOffsets::TooLong {
                field: "member_id",
                len: 32768,
            },
        ),
        (
            offsets(),
            member("m", Some(&long)),
            InvalidOffsets::TooLong {
                field: "group_instance_id",
                len: 32768,
            },
        ),
        (
            with_metadata,
            ConsumerGroupMetadata::new("g"),
            InvalidOffsets::TooLong {
                field: "metadata",
                len: 32768,
            },
        ),
        (
            vec![OffsetToCommit::new("..", 0, 5)],
            ConsumerGroupMetadata::new("g"),
            InvalidOffsets::Topic(InvalidTopicName::DotOrDotDot),
        ),
    ] {
        assert_eq!(
            p.transactions().unwrap().send_offsets(now, offsets, group),
            Err(TransactionError::InvalidOffsets(expected))
        );
    }
    assert_eq!(
        p.transactions()
            .unwrap()
            .send_offsets(now, offsets(), member(&at_limit, Some(&at_limit))),
        Err(TransactionError::InvalidState {
            operation: TransactionOperation::SendOffsets,
            state: TransactionState::Uninitialized
        }),
        "at the limit the names pass"
    );
}
